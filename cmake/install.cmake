# What `cmake --install BUILD [--prefix DIR]` puts where:
#   include/steno.h
#   lib/libsteno.so.VERSION (+ the SONAME and .so links), lib/libsteno.a
#   lib/pkgconfig/steno.pc                   pkg-config --cflags --libs steno
#   lib/cmake/steno/stenoConfig*.cmake       find_package(steno) -> steno::steno (the shared library)
#   bin/steno, share/man/man1/steno.1
#   share/steno/models/steno-en-tiny-ctc.gguf   the CLI's default model (tools/steno/default_model.c)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(FILES ${CMAKE_SOURCE_DIR}/include/steno.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS steno_shared EXPORT stenoTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS steno ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS steno_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/docs/steno.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_SOURCE_DIR}/models/steno-en-tiny-ctc.gguf DESTINATION ${CMAKE_INSTALL_DATADIR}/steno/models)

# steno.pc finds its prefix from where it lies (${pcfiledir}), so that
# `cmake --install --prefix` anywhere gives a working file. The static
# library's dependencies go in Requires.private / Libs.private.
file(RELATIVE_PATH STENO_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(STENO_PC_REQUIRES "vulkan zlib libpcre2-8")
if(STENO_FFMPEG)
  string(APPEND STENO_PC_REQUIRES " libavformat libavcodec libswresample libavutil")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/steno.pc.in ${CMAKE_BINARY_DIR}/steno.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/steno.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(STENO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/steno)
install(EXPORT stenoTargets NAMESPACE steno:: DESTINATION ${STENO_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/stenoConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/stenoConfig.cmake INSTALL_DESTINATION ${STENO_CMAKE_DIR})
# 0.x: only the same minor version is compatible (as the SONAME says).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/stenoConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/stenoConfig.cmake ${CMAKE_BINARY_DIR}/stenoConfigVersion.cmake
        DESTINATION ${STENO_CMAKE_DIR})
