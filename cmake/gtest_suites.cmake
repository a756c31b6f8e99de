# Run by ctest (TEST_INCLUDE_FILES): one ctest test per GoogleTest suite of KILN_TEST_BINARY
# whose name passes KILN_SUITE_FILTER (a gtest filter), labelled KILN_SUITE_LABEL, run through
# KILN_SUITE_STATUS (cmake/gtest_suite_status.sh): about 120
# processes instead of about 480 for the fast set, each of which maps oneDNN, MPI and the CUDA
# runtime and starts gtest.
execute_process(COMMAND "${KILN_TEST_BINARY}" --gtest_list_tests "--gtest_filter=${KILN_SUITE_FILTER}"
                OUTPUT_VARIABLE listing RESULT_VARIABLE listed)
if(NOT listed EQUAL 0)
  add_test(kiln_tests_NOT_LISTED "${KILN_TEST_BINARY}" --gtest_list_tests)
  return()
endif()
string(REPLACE "\n" ";" lines "${listing}")
foreach(line IN LISTS lines)
  if(line MATCHES "^([A-Za-z0-9_]+)\\.$")
    set(suite "${CMAKE_MATCH_1}")
    # A suite where any test skipped (and none failed) is reported as skipped, one with a failure
    # as failed: cmake/gtest_suite_status.sh says why a regular expression cannot.
    add_test("${suite}" "${KILN_SUITE_STATUS}" "${KILN_TEST_BINARY}" "--gtest_filter=${suite}.*")
    set_tests_properties("${suite}" PROPERTIES LABELS "${KILN_SUITE_LABEL}" TIMEOUT 1200 SKIP_RETURN_CODE 77)
  endif()
endforeach()
