// The tiny checkpoints under tests/data/models that stand for each family, listed once for every
// suite that runs "each family" (a new family, or a new kind of layer, is added here).
#ifndef TANDEM_TESTS_FIXTURE_FAMILIES_H_
#define TANDEM_TESTS_FIXTURE_FAMILIES_H_

#include <string>
#include <vector>

namespace tandem::testing {

// One per family, and one more per kind of layer a family has (Nemotron 3's experts): the
// suites that check behaviour (exactness, scheduling, devices) run each. The variants of a
// family's options (biases, dtypes, block counts) only need the parity and loading suites.
inline const std::vector<std::string> kFamilyFixtures = {
    "jamba-tiny",      "zamba2-tiny",    "mamba2-tiny", "granite-tiny",
    "nemotron-h-tiny", "nemotron3-tiny", "bamba-tiny"};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_FIXTURE_FAMILIES_H_
