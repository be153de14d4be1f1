# Run at every build (cmake -P): writes OUTPUT, a header defining NCCL_CAR_BUILD_ID as
# VERSION+<digest of the library's sources>, and rewrites it only when that changed, so an
# unchanged tree rebuilds nothing. The digest, not a commit configured once, follows every
# edit: a choice table measured with one library is never taken for another's
# (plugin/machine_fingerprint.h).
#   cmake -DSOURCE_DIR=... -DOUTPUT=... -DVERSION=... -P cmake/build_id.cmake
file(GLOB_RECURSE sources LIST_DIRECTORIES false RELATIVE "${SOURCE_DIR}"
     "${SOURCE_DIR}/kernels/*" "${SOURCE_DIR}/plugin/*" "${SOURCE_DIR}/shim/*")
list(SORT sources)
set(listing "")
foreach(source IN LISTS sources)
  file(SHA256 "${SOURCE_DIR}/${source}" digest)
  string(APPEND listing "${source} ${digest}\n")
endforeach()
string(SHA256 digest "${listing}")
string(SUBSTRING "${digest}" 0 12 digest)
set(text "#pragma once\n#define NCCL_CAR_BUILD_ID \"${VERSION}+${digest}\"\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUTPUT}" "${text}")
endif()
