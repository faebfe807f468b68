# The helpers that turn folders into targets. Every step, kernel and test goes through one of
# these, so no folder repeats another's build logic.

# ---------------------------------------------------------------------------------------------
# pagedattn_test_timeout(<seconds> <test>...)
#   Gives the tests a time limit of <seconds> in a plain build, PAGEDATTN_TIMEOUT_SCALE times
#   that under the sanitizers (the top-level CMakeLists.txt says why).
# ---------------------------------------------------------------------------------------------
function(pagedattn_test_timeout seconds)
  math(EXPR limit "${seconds} * ${PAGEDATTN_TIMEOUT_SCALE}")
  set_tests_properties(${ARGN} PROPERTIES TIMEOUT ${limit})
endfunction()

# ---------------------------------------------------------------------------------------------
# pagedattn_add_kernel(<NN> <name>)
#   Compiles kernels/<NN>_<name>.cuh once for the emulator (g++) and, when CUDA is built, once
#   for the GPU (nvcc), from the same source, into the library pagedattn_kernel_<NN>. Each
#   target gets a generated unit that includes the kernel and exports
#   `pa::kernels_<target>::step<NN>_entry()`, which the registry lists. Two registries link it:
#   pagedattn_kernels (every step: the tour, the tests, the benchmarks) and pagedattn_kernels_<NN>
#   (this step alone: its program). A rung includes the rung below it, so editing step 06's file
#   makes every unit from 06 up stale; the step's program depends on its own unit only, so
#   rebuilding it after such an edit recompiles one unit (docs/pages/debugging.md measures it).
# ---------------------------------------------------------------------------------------------
set(PAGEDATTN_KERNEL_STEPS "" CACHE INTERNAL "")
function(pagedattn_add_kernel number name)
  set(KERNEL_FILE "${number}_${name}.cuh")
  set(KERNEL_NS "step${number}")
  set(generated "${CMAKE_BINARY_DIR}/generated/kernels")
  configure_file("${PROJECT_SOURCE_DIR}/cmake/kernel_unit.in" "${generated}/step${number}.emu.cpp" @ONLY)
  add_library(pagedattn_kernel_${number} STATIC "${generated}/step${number}.emu.cpp")
  if(PAGEDATTN_HAVE_CUDA)
    configure_file("${PROJECT_SOURCE_DIR}/cmake/kernel_unit.in" "${generated}/step${number}.cuda.cu" @ONLY)
    target_sources(pagedattn_kernel_${number} PRIVATE "${generated}/step${number}.cuda.cu")
    set_target_properties(pagedattn_kernel_${number} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  endif()
  target_include_directories(pagedattn_kernel_${number} PUBLIC "${PROJECT_SOURCE_DIR}")
  target_link_libraries(pagedattn_kernel_${number} PUBLIC pagedattn_common)
  target_link_libraries(pagedattn_kernels PUBLIC pagedattn_kernel_${number})
  # The registry of this step alone, from its own one-line kernel_list.inc.
  pagedattn_write_list("${generated}/step${number}" "PA_KERNEL_STEP(${number})\n")
  add_library(pagedattn_kernels_${number} STATIC "${PROJECT_SOURCE_DIR}/kernels/registry.cpp")
  target_include_directories(pagedattn_kernels_${number} PRIVATE "${generated}/step${number}")
  target_link_libraries(pagedattn_kernels_${number} PUBLIC pagedattn_kernel_${number})
  set(steps ${PAGEDATTN_KERNEL_STEPS})
  list(APPEND steps ${number})
  set(PAGEDATTN_KERNEL_STEPS "${steps}" CACHE INTERNAL "")
endfunction()

# Writes \p lines to <dir>/kernel_list.inc, touching the file only when they change.
function(pagedattn_write_list dir lines)
  file(WRITE "${dir}/kernel_list.inc.tmp" "${lines}")
  file(COPY_FILE "${dir}/kernel_list.inc.tmp" "${dir}/kernel_list.inc" ONLY_IF_DIFFERENT)
endfunction()

# Writes the list of kernel steps for kernels/registry.cpp (the registry of every step).
function(pagedattn_write_kernel_list)
  set(lines "")
  foreach(number IN LISTS PAGEDATTN_KERNEL_STEPS)
    string(APPEND lines "PA_KERNEL_STEP(${number})\n")
  endforeach()
  pagedattn_write_list("${CMAKE_BINARY_DIR}/generated/kernels" "${lines}")
endfunction()

# ---------------------------------------------------------------------------------------------
# pagedattn_add_step(<NN_name>)
#   steps/<NN_name>/main.cpp  -> program  stepNN_name
#   steps/<NN_name>/bench.cpp -> program  benchNN_name  (Google Benchmark)
#   and a smoke test that runs the program on its debug workload (it exits non-zero on any
#   mismatch), labelled "step" so `ctest -L step` runs the ladder.
#   The program links the registry of its own kernel (pagedattn_kernels_NN) and no other rung's,
#   so building it compiles that rung alone; a step without a kernel (00, 01) links only what
#   it includes, common/ and reference/.
# ---------------------------------------------------------------------------------------------
function(pagedattn_add_step folder)
  set(dir "${PROJECT_SOURCE_DIR}/steps/${folder}")
  add_executable(step${folder} "${dir}/main.cpp")
  string(SUBSTRING "${folder}" 0 2 number)
  if(TARGET pagedattn_kernels_${number})
    target_link_libraries(step${folder} PRIVATE pagedattn_harness_core pagedattn_kernels_${number})
  else()
    target_link_libraries(step${folder} PRIVATE pagedattn_reference)
  endif()
  add_executable(bench${folder} "${dir}/bench.cpp")
  target_link_libraries(bench${folder} PRIVATE pagedattn_bench)
  if(BUILD_TESTING)
    add_test(NAME step${folder}.smoke COMMAND step${folder} --quiet)
    set_tests_properties(step${folder}.smoke PROPERTIES LABELS "step")
    pagedattn_test_timeout(300 step${folder}.smoke)
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
  # Each ctest runs its test case by name. Catch2 v2 exits 0 when the name matches no test case,
  # and a name with a ';' in it reaches ctest cut there (a CMake list), so such a test ran nothing
  # and passed: --warn NoTests makes a name that matches nothing fail, as Catch2 v3 does by itself.
  set(extra_args "")
  if(Catch2_VERSION VERSION_LESS 3)
    set(extra_args EXTRA_ARGS --warn NoTests)
  endif()
  math(EXPR limit "600 * ${PAGEDATTN_TIMEOUT_SCALE}")
  catch_discover_tests(${name}
    TEST_PREFIX "${name}."
    ${extra_args}
    PROPERTIES LABELS "${labels}" SKIP_REGULAR_EXPRESSION "PA_SKIPPED" SKIP_RETURN_CODE 4 TIMEOUT ${limit})
endfunction()

# ---------------------------------------------------------------------------------------------
# pagedattn_add_example(<NN_name>)
#   examples/<NN_name>/main.cpp -> program exampleNN_name, which calls the entry point
#   (pagedattn_api, api/decode.h) and checks its outputs with the harness's oracle check; and a
#   test that runs it (it exits non-zero on any mismatch), labelled "example". The GPU runs too
#   where one is present, as in the step programs' smoke tests.
# ---------------------------------------------------------------------------------------------
function(pagedattn_add_example folder)
  add_executable(example${folder} "${PROJECT_SOURCE_DIR}/examples/${folder}/main.cpp")
  target_link_libraries(example${folder} PRIVATE pagedattn_harness_core pagedattn_api)
  if(BUILD_TESTING)
    add_test(NAME example${folder}.run COMMAND example${folder})
    set_tests_properties(example${folder}.run PROPERTIES LABELS "example")
    pagedattn_test_timeout(300 example${folder}.run)
  endif()
endfunction()
