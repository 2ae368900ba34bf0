# The coordinator's dashboard: its page, scripts and Debian's Chart.js
# (libjs-chart.js, scripts/deps.sh installs it), embedded into the library
# at build time so that nothing is fetched at run time.
find_file(COHORT_CHARTJS chart.min.js
  PATHS /usr/share/javascript/chart.js /usr/share/nodejs/chart.js/dist
  NO_DEFAULT_PATH
  DOC "Chart.js 3 or later, UMD build (Debian: libjs-chart.js)")
if(NOT COHORT_CHARTJS)
  message(FATAL_ERROR "the coordinator's dashboard needs Chart.js: apt-get install libjs-chart.js "
                      "(scripts/deps.sh does), or -DCOHORT_CHARTJS=/path/to/chart.min.js")
endif()

set(_dashboard_dir ${PROJECT_SOURCE_DIR}/src/coordinator/server/dashboard)
set(_dashboard_files index.html dashboard.css format.js api.js charts.js timeline.js members.js panels.js
  dashboard.js)
set(_dashboard_assets "chart.min.js=${COHORT_CHARTJS}")
set(_dashboard_inputs ${COHORT_CHARTJS})
foreach(_f IN LISTS _dashboard_files)
  list(APPEND _dashboard_assets "${_f}=${_dashboard_dir}/${_f}")
  list(APPEND _dashboard_inputs ${_dashboard_dir}/${_f})
endforeach()
set(_dashboard_cpp ${PROJECT_BINARY_DIR}/generated/dashboard_assets.cpp)
string(REPLACE ";" "|" _dashboard_assets_arg "${_dashboard_assets}")
add_custom_command(
  OUTPUT ${_dashboard_cpp}
  COMMAND ${CMAKE_COMMAND} "-DASSETS=${_dashboard_assets_arg}" -DOUTPUT=${_dashboard_cpp}
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_assets.cmake
  DEPENDS ${_dashboard_inputs} ${PROJECT_SOURCE_DIR}/cmake/embed_assets.cmake
  COMMENT "Embedding the coordinator's dashboard"
  VERBATIM)
list(APPEND COHORT_SOURCES ${_dashboard_cpp})
