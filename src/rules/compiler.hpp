// Compiles program.texts[0] into program's nodes (see compiler.cpp).
#pragma once

#include "rules/program.hpp"

namespace cohort::detail {

// program.texts[0] and program.symbols must be set. Throws Error(parse).
void compile_program(Program& program, const Definitions& definitions, std::string_view source);

}  // namespace cohort::detail
