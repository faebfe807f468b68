# The helpers that turn folders into targets. Every step, kernel and test goes through one of
# these, so no folder repeats another's build logic.

# ---------------------------------------------------------------------------------------------
# pagedattn_add_kernel(<NN> <name>)
#   Compiles kernels/<NN>_<name>.cuh once for the emulator (g++) and, when CUDA is built, once
#   for the GPU (nvcc), from the same source. Each target gets a generated unit that includes
#   the kernel and exports `pa::kernels_<target>::step<NN>_entry()`, which the registry lists.
# ---------------------------------------------------------------------------------------------
set(PAGEDATTN_KERNEL_STEPS "" CACHE INTERNAL "")
function(pagedattn_add_kernel number name)
  set(KERNEL_FILE "${number}_${name}.cuh")
  set(KERNEL_NS "step${number}")
  set(generated "${CMAKE_BINARY_DIR}/generated/kernels")
  configure_file("${PROJECT_SOURCE_DIR}/cmake/kernel_unit.in" "${generated}/step${number}.emu.cpp" @ONLY)
  target_sources(pagedattn_kernels PRIVATE "${generated}/step${number}.emu.cpp")
  if(PAGEDATTN_HAVE_CUDA)
    configure_file("${PROJECT_SOURCE_DIR}/cmake/kernel_unit.in" "${generated}/step${number}.cuda.cu" @ONLY)
    target_sources(pagedattn_kernels PRIVATE "${generated}/step${number}.cuda.cu")
  endif()
  set(steps ${PAGEDATTN_KERNEL_STEPS})
  list(APPEND steps ${number})
  set(PAGEDATTN_KERNEL_STEPS "${steps}" CACHE INTERNAL "")
endfunction()

# Writes the list of kernel steps for kernels/registry.cpp.
function(pagedattn_write_kernel_list)
  set(lines "")
  foreach(number IN LISTS PAGEDATTN_KERNEL_STEPS)
    string(APPEND lines "PA_KERNEL_STEP(${number})\n")
  endforeach()
  file(WRITE "${CMAKE_BINARY_DIR}/generated/kernels/kernel_list.inc.tmp" "${lines}")
  file(COPY_FILE "${CMAKE_BINARY_DIR}/generated/kernels/kernel_list.inc.tmp"
       "${CMAKE_BINARY_DIR}/generated/kernels/kernel_list.inc" ONLY_IF_DIFFERENT)
endfunction()

# ---------------------------------------------------------------------------------------------
# pagedattn_add_step(<NN_name>)
#   steps/<NN_name>/main.cpp  -> program  stepNN_name
#   steps/<NN_name>/bench.cpp -> program  benchNN_name  (Google Benchmark)
#   and a smoke test that runs the program on its debug workload (it exits non-zero on any
#   mismatch), labelled "step" so `ctest -L step` runs the ladder.
# ---------------------------------------------------------------------------------------------
function(pagedattn_add_step folder)
  set(dir "${PROJECT_SOURCE_DIR}/steps/${folder}")
  add_executable(step${folder} "${dir}/main.cpp")
  target_link_libraries(step${folder} PRIVATE pagedattn_harness)
  add_executable(bench${folder} "${dir}/bench.cpp")
  target_link_libraries(bench${folder} PRIVATE pagedattn_bench)
  if(BUILD_TESTING)
    add_test(NAME step${folder}.smoke COMMAND step${folder} --quiet)
    set_tests_properties(step${folder}.smoke PROPERTIES LABELS "step" TIMEOUT 300)
  endif()
endfunction()

# ---------------------------------------------------------------------------------------------
# pagedattn_add_test(<name> [GPU])
#   tests/<name>.cpp -> a Catch2 program; each TEST_CASE becomes a ctest. GPU tests carry the
#   label "gpu" and skip (with the reason) where there is no device.
# ---------------------------------------------------------------------------------------------
function(pagedattn_add_test name)
  cmake_parse_arguments(ARG "GPU" "" "" ${ARGN})
  add_executable(${name} "${PROJECT_SOURCE_DIR}/tests/${name}.cpp")
  target_link_libraries(${name} PRIVATE pagedattn_testlib)
  set(labels "unit")
  if(ARG_GPU)
    set(labels "gpu")
  endif()
  # Catch2 v2 has no SKIP: a skipped test prints PA_SKIPPED first (tests/catch_compat.h);
  # Catch2 v3's SKIP() exits with 4.
  catch_discover_tests(${name}
    TEST_PREFIX "${name}."
    PROPERTIES LABELS "${labels}" SKIP_REGULAR_EXPRESSION "PA_SKIPPED" SKIP_RETURN_CODE 4 TIMEOUT 600)
endfunction()
