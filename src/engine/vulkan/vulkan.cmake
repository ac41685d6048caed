# The Vulkan backend (src/engine/vulkan): its C sources join corral_engine, and its compute
# shaders (shaders/*.comp) are compiled to SPIR-V by glslc at build time and embedded in the
# binary (vk_shaders.h). The loader is opened at run time (vk_loader.h), so nothing links it.
set(VK_DIR ${CMAKE_SOURCE_DIR}/src/engine/vulkan)
file(GLOB VK_SOURCES CONFIGURE_DEPENDS ${VK_DIR}/*.c)
file(GLOB VK_SHADERS CONFIGURE_DEPENDS ${VK_DIR}/shaders/*.comp)
# The quantized products (per row and tiled) are also compiled with INT_DOT, as NAME_dot.spv:
# their integer sums by the integer dot product instruction, for devices with
# shaderIntegerDotProduct (vk_device.c chooses at device open).
set(VK_DOT_SHADERS matmul_q4_0 matmul_q4_1 matmul_q5_0 matmul_q5_1 matmul_q8_0 matmul_q2_k
    matmul_q3_k matmul_q4_k matmul_q5_k matmul_q6_k matmul_mxfp4 matmul_iq4_nl matmul_iq4_xs
    matmul_tiled_q4_0
    matmul_tiled_q4_1 matmul_tiled_q5_0 matmul_tiled_q5_1 matmul_tiled_q8_0 matmul_tiled_q2_k
    matmul_tiled_q3_k matmul_tiled_q4_k matmul_tiled_q5_k matmul_tiled_q6_k matmul_tiled_mxfp4
    matmul_tiled_iq4_nl matmul_tiled_iq4_xs)
foreach(type iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m)
  list(APPEND VK_DOT_SHADERS matmul_${type} matmul_tiled_${type})
endforeach()
set(spirv "")
foreach(shader IN LISTS VK_SHADERS)
  get_filename_component(name ${shader} NAME_WE)
  set(variants ${name})
  if(name IN_LIST VK_DOT_SHADERS)
    list(APPEND variants ${name}_dot)
  endif()
  foreach(variant IN LISTS variants)
    set(defines "")
    if(variant MATCHES "_dot$")
      set(defines -DINT_DOT)
    endif()
    set(out ${CMAKE_BINARY_DIR}/generated/spirv/${variant}.spv)
    add_custom_command(OUTPUT ${out}
                       COMMAND ${CORRAL_GLSLC} --target-env=vulkan1.1 -O -I ${VK_DIR}/shaders
                               ${defines} -MD -MF ${out}.d ${shader} -o ${out}
                       DEPENDS ${shader} DEPFILE ${out}.d
                       COMMENT "glslc ${name}.comp ${defines}" VERBATIM)
    list(APPEND spirv ${out})
  endforeach()
endforeach()
# the list crosses to the script joined by '|' (a ';' would split the argument)
string(REPLACE ";" "|" spirv_joined "${spirv}")
set(VK_EMBEDDED ${CMAKE_BINARY_DIR}/generated/vk_shaders_data.c)
add_custom_command(OUTPUT ${VK_EMBEDDED}
                   COMMAND ${CMAKE_COMMAND} -DOUTPUT=${VK_EMBEDDED} "-DFILES=${spirv_joined}"
                           -P ${VK_DIR}/embed_spirv.cmake
                   DEPENDS ${spirv} ${VK_DIR}/embed_spirv.cmake ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake
                   COMMENT "embedding SPIR-V" VERBATIM)
target_sources(corral_engine PRIVATE ${VK_SOURCES} ${VK_EMBEDDED})
target_include_directories(corral_engine PRIVATE ${VK_DIR} ${CORRAL_VULKAN_INCLUDE})
target_compile_definitions(corral_engine PUBLIC CORRAL_VULKAN=1)
target_link_libraries(corral_engine PRIVATE ${CMAKE_DL_LIBS})
