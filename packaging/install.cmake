# What `cmake --install` puts where, and `cpack -G DEB`'s package of it:
#   bin/rocemu                              the command
#   lib/rocemu/librocemu-verbs.so           the preloaded verbs provider (private: not in the linker's path;
#                                           rocemu exec finds it from the binary, ../lib/rocemu)
#   share/rocemu/scenarios/, sim-plot.py    rocemu sim's scenarios and plot script
#   share/doc/rocemu/                       README.md, switch-README.md, LICENSE
#   share/man/man1/rocemu.1, rocemu-CMD.1   made from the CLI's help text by help2man (packaging/make-man.sh)
#   share/bash-completion/completions/rocemu  `rocemu completion bash`
#   lib/systemd/system/rocemu.service       `rocemu up --daemon` in /run/rocemu
# packaging/check-install.sh tests it (CTest rocemu_install:unit).
install(TARGETS rocemu RUNTIME DESTINATION bin)
install(TARGETS rocemu-verbs LIBRARY DESTINATION lib/rocemu)
install(DIRECTORY scenarios/ DESTINATION share/rocemu/scenarios)
install(PROGRAMS scripts/sim-plot.py DESTINATION share/rocemu)
install(FILES README.md LICENSE DESTINATION share/doc/rocemu)
install(FILES switch/README.md DESTINATION share/doc/rocemu RENAME switch-README.md)

# Man pages and the completion script, from the built program.
find_program(ROCEMU_HELP2MAN help2man)
if(ROCEMU_HELP2MAN)
  add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/man/rocemu.1
    COMMAND ${PROJECT_SOURCE_DIR}/packaging/make-man.sh $<TARGET_FILE:rocemu> ${PROJECT_BINARY_DIR}/man
    DEPENDS rocemu ${PROJECT_SOURCE_DIR}/packaging/make-man.sh
    COMMENT "Man pages from rocemu's help text")
  add_custom_target(rocemu_man ALL DEPENDS ${PROJECT_BINARY_DIR}/man/rocemu.1)
  install(DIRECTORY ${PROJECT_BINARY_DIR}/man/ DESTINATION share/man/man1)
else()
  message(WARNING "help2man not found: no man pages (apt-get install help2man)")
endif()
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/completion/rocemu
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/completion
  COMMAND $<TARGET_FILE:rocemu> completion bash > ${PROJECT_BINARY_DIR}/completion/rocemu
  DEPENDS rocemu)
add_custom_target(rocemu_completion ALL DEPENDS ${PROJECT_BINARY_DIR}/completion/rocemu)
install(FILES ${PROJECT_BINARY_DIR}/completion/rocemu DESTINATION share/bash-completion/completions)

# The unit names the installed binary: written at install time, when the
# prefix is the one installed to (cpack's included).
install(CODE "
  file(READ \"${PROJECT_SOURCE_DIR}/packaging/rocemu.service\" unit)
  string(REPLACE \"@BINDIR@\" \"\${CMAKE_INSTALL_PREFIX}/bin\" unit \"\${unit}\")
  file(WRITE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system/rocemu.service\" \"\${unit}\")
  message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system/rocemu.service\")
")

set(CPACK_PACKAGE_NAME rocemu)
set(CPACK_PACKAGE_VENDOR "rocemu")
set(CPACK_PACKAGE_CONTACT "rocemu maintainers <rocemu@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "software RoCEv2 fabric: emulated RDMA NICs, a RoCE switch, a verbs provider")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "perftest, ibverbs-utils, python3-matplotlib")
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
include(CPack)
