// Locality files (docs/formats.md): {NODE_ID: {FILE_PATH: SCORE}} in YAML
// or JSON, read from disk as load_locality does, the format sniffed.
#include "fuzz_input.hpp"

#include <cohort/sharding.hpp>

#include <fstream>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const auto path = cohort::fuzz::scratch_directory() / "locality";
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                  static_cast<std::streamsize>(size));
    cohort::fuzz::expect_named_errors("locality file", [&] { (void)cohort::load_locality(path); });
    return 0;
}
