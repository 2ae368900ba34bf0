# Sourced by scripts/sanitize.sh and scripts/test.sh: the integration tests
# that the ASan stage runs with cohort's programs built under ASan+UBSan
# (docs/guide.md, "Sanitizers and fuzzing", says why the others are not).
# When that stage follows, scripts/test.sh leaves them out of the normal
# ctest run: the same test twice, serially, cost CI about 6 minutes.
#   asan_integration_programs  whose processes are cohort's programs
#   asan_integration_python    whose ranks are Python processes (the ASan
#                              runtime preloaded)
asan_integration_programs='^integration\.((launcher|coordinator_restart|coordinator_ha|coordinator_members|orphans|comm_processes|torchrun)\..*|train_demo\.(three|kill|checkpoint)|hosts\.(tool|script|training_.*))$'
asan_integration_python='^integration\.hosts\.(collectives_.*|mtu|store_route)$'
