# Embeds the chat page (src/server/api/ui/*) into corral_server as C byte arrays (ui_assets.c in
# the build tree), so the one binary serves the page with nothing else installed.
file(GLOB CORRAL_UI_FILES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/ui/*)
corral_embed_files(TARGET corral_server OUTPUT ${CMAKE_BINARY_DIR}/generated/ui_assets.c
                   HEADER server/api/ui_assets.h ELEMENT "unsigned char" TYPE ui_asset
                   TABLE ui_assets COUNT ui_n_assets FROM src/server/api/ui/
                   FILES ${CORRAL_UI_FILES})
