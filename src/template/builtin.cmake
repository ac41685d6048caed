# Embeds src/template/builtin/*.gotmpl, *.json and index.json into corral_template as C byte
# arrays (builtin_data.c in the build tree), so the one binary carries its built-in templates.
file(GLOB CORRAL_BUILTIN_FILES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/builtin/*.gotmpl
     ${CMAKE_CURRENT_LIST_DIR}/builtin/*.json)
corral_embed_files(TARGET corral_template OUTPUT ${CMAKE_BINARY_DIR}/generated/builtin_data.c
                   HEADER template/builtin_data.h ELEMENT "char" TYPE builtin_file
                   TABLE builtin_files COUNT builtin_n_files FROM src/template/builtin/
                   FILES ${CORRAL_BUILTIN_FILES})
