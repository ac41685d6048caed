# cmake -DOUTPUT=file.c -DFILES=a.spv|b.spv -P embed_spirv.cmake: the compiled shaders as the
# table vk_shaders.h declares. SPIR-V is read as 32-bit words, hence the alignment.
include(${CMAKE_CURRENT_LIST_DIR}/../../../cmake/embed_files.cmake)
string(REPLACE "|" ";" files "${FILES}")
corral_embed_generate(OUTPUT "${OUTPUT}" HEADER "vk_shaders.h"
                      ELEMENT "_Alignas(4) unsigned char" TYPE "vk_shader_code"
                      TABLE "vk_shader_table" COUNT "vk_shader_count" FROM "src/engine/vulkan/shaders/"
                      FILES ${files})
