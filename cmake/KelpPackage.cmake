# Installing Kelp and the Debian package (docs/install.md).
#   cmake --install build            (/usr/local by default; -DCMAKE_INSTALL_PREFIX=/usr)
#   scripts/package.sh               -> build/kelp_<version>_amd64.deb (CPack)
# Installs the binary, mount.kelp (a link to it, where mount(8) looks: sbin), the systemd
# units, /etc/default/kelp, man pages generated from the binary's own -h, and the docs.
include(GNUInstallDirs)
# `cmake --install` and CPack take what is built; scripts/package.sh builds kelp and kelp_man
# (not every test) first.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

set(KELP_MAN_DIR ${CMAKE_BINARY_DIR}/man)
add_custom_command(
  OUTPUT ${KELP_MAN_DIR}/kelp.1.gz
  COMMAND python3 ${PROJECT_SOURCE_DIR}/packaging/gen_man.py $<TARGET_FILE:kelp> ${KELP_MAN_DIR} ${PROJECT_VERSION}
  DEPENDS kelp ${PROJECT_SOURCE_DIR}/packaging/gen_man.py
  COMMENT "Man pages from kelp -h"
  VERBATIM)
add_custom_target(kelp_man ALL DEPENDS ${KELP_MAN_DIR}/kelp.1.gz)

install(TARGETS kelp RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# mount(8) runs /sbin/mount.<type>; on Debian /sbin is /usr/sbin.
install(CODE "
  file(MAKE_DIRECTORY \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SBINDIR}\")
  file(CREATE_LINK ../${CMAKE_INSTALL_BINDIR}/kelp
       \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SBINDIR}/mount.kelp\" SYMBOLIC)")
install(DIRECTORY ${KELP_MAN_DIR}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 FILES_MATCHING PATTERN "*.1.gz")
install(DIRECTORY ${KELP_MAN_DIR}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 FILES_MATCHING PATTERN "*.8.gz")
install(FILES
  packaging/systemd/kelp-server.service
  packaging/systemd/kelp-filer.service
  packaging/systemd/kelp-volume@.service
  packaging/systemd/kelp-mount@.service
  DESTINATION lib/systemd/system)
install(FILES packaging/default-kelp DESTINATION /etc/default RENAME kelp)
install(FILES README.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs FILES_MATCHING PATTERN "*.md" PATTERN "*.png")
install(FILES docs/systemd.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES packaging/grafana/kelp-dashboard.json DESTINATION ${CMAKE_INSTALL_DOCDIR}/grafana)
install(DIRECTORY DESTINATION /etc/kelp)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kelp)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Kelp")
set(CPACK_PACKAGE_CONTACT "Kelp developers <kelp@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed filesystem: filer, volume servers and a FUSE mount")
set(CPACK_PACKAGE_DESCRIPTION "Kelp stores file data as blobs on volume servers and the namespace in a filer
(RocksDB, keyed by inode), and mounts it as a POSIX directory through FUSE with a
local read cache tiered by chunk size. One binary, kelp, with mount.kelp for mount(8)
and /etc/fstab, systemd units, and a web UI on the filer's port (/ui).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "file:///usr/share/doc/kelp/README.md")
# Libraries by dpkg-shlibdeps from what the binary links; fuse3 for fusermount3.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "fuse3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "curl")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles)
include(CPack)
