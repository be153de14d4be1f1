# `cmake --install build --prefix P`, and the wheel (pyproject.toml), which is this install
# with P = site-packages/nccl_car_cli/:
#   P/lib/libnccl-car.so, P/lib/libnccl-car-audit.so   the library and its LD_AUDIT module
#   P/lib/nccl-car/front/libnccl.so.2                  the front (LD_AUDIT, drop-in folders)
#   P/bin/nccl_car_query, P/bin/car_nccl_bench         the tool's query program and benchmark
#   P/share/doc/nccl-car/                              README, the user guide, settings, the tool
# and the command-line tool: for cmake --install, P/bin/nccl-car and its Python package in
# P/lib/nccl-car/python/; in the wheel, the package is P itself and pip makes the command.
# tools/nccl_car_cli/paths.py finds each file from the library's folder the same way.
# Components: runtime (both), tool (cmake --install only), wheel (the wheel only; not
# installed unless asked for by name).

# Everything installed, to build before installing (the wheel builds only this).
add_custom_target(nccl_car_package)
add_dependencies(nccl_car_package nccl-car nccl-car-audit nccl-car-front nccl_car_query)

install(TARGETS nccl-car nccl-car-audit LIBRARY DESTINATION lib COMPONENT runtime)
install(TARGETS nccl-car-front LIBRARY DESTINATION lib/${car_front_folder} COMPONENT runtime)
install(TARGETS nccl_car_query RUNTIME DESTINATION bin COMPONENT runtime)
if(TARGET car_nccl_bench)
  add_dependencies(nccl_car_package car_nccl_bench)
  # The real NCCL it links: where the build found it, or, in a wheel, a Python NCCL package
  # installed beside ours (PyTorch's nvidia-nccl-cu*). Elsewhere LD_LIBRARY_PATH must name it.
  set_target_properties(car_nccl_bench PROPERTIES
    INSTALL_RPATH "$ORIGIN/../../nvidia/nccl/lib" INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS car_nccl_bench RUNTIME DESTINATION bin COMPONENT runtime)
endif()
install(FILES README.md docs/user-guide.md docs/settings.md docs/cli.md DESTINATION share/doc/nccl-car COMPONENT runtime)

# The tool's Python files, without __pycache__.
set(python_files FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(DIRECTORY tools/nccl_car_cli/ DESTINATION . COMPONENT wheel EXCLUDE_FROM_ALL ${python_files})
install(DIRECTORY tools/nccl_car_cli/ DESTINATION lib/nccl-car/python/nccl_car_cli COMPONENT tool ${python_files})
# bin/nccl-car: a link to tools/nccl-car installed beside the package, which it finds through
# the link (it resolves its own path).
install(PROGRAMS tools/nccl-car DESTINATION lib/nccl-car/python COMPONENT tool)
install(CODE [[
  set(bin "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/bin")
  file(MAKE_DIRECTORY "${bin}")
  file(CREATE_LINK ../lib/nccl-car/python/nccl-car "${bin}/nccl-car" SYMBOLIC)
  message(STATUS "Installing: ${bin}/nccl-car -> ../lib/nccl-car/python/nccl-car")
]] COMPONENT tool)
