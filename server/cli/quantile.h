// Order statistics for the benchmark reports.
#ifndef TANDEM_SERVER_CLI_QUANTILE_H_
#define TANDEM_SERVER_CLI_QUANTILE_H_

#include <vector>

namespace tandem::cli {

// The q-quantile (0..1) of `values` by the nearest-rank rule; 0 for an empty set.
double Quantile(std::vector<double> values, double q);

}  // namespace tandem::cli

#endif  // TANDEM_SERVER_CLI_QUANTILE_H_
