// src/cli/report.h — printing a BenchReport: a table for people, or one JSON document for scripts.
#pragma once

#include <ostream>

#include "cli/bench.h"

namespace flashlab {
namespace cli {

void print_table(const BenchReport& report, std::ostream& os);
void print_json(const BenchReport& report, std::ostream& os);

}  // namespace cli
}  // namespace flashlab
