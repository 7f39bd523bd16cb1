// Scale-free reward of an evaluated candidate for the MCTS.
//
// r(s) = s^p / (1 + s^p) for a passing candidate with speedup s over eager, 0 otherwise, with
// p = ln 9 / ln(reference_speedup) so that r(1) = 0.5 and r(reference_speedup) = 0.9.
// Why this shape: it depends only on the speedup ratio (no op's absolute time leaks in, so
// one set of UCT constants works for a 5 us softmax and a 5 ms norm); it is a logistic in
// log-speedup, so halving and doubling the time move the reward symmetrically around eager;
// every valid kernel, even a slower one, scores above every invalid one (r > 0), so the tree
// still learns which subtrees compile and validate; and it saturates, so one noisy 20x
// outlier cannot swamp the mean of a subtree.
#pragma once

#include "kforge/v1/common.pb.h"

namespace kforge {

// Reward of a passing candidate with the given speedup; 0 for a non-positive or non-finite
// speedup (not timed).
double RewardForSpeedup(double speedup, double reference_speedup);

// Reward of an evaluation: RewardForSpeedup for PASS, 0 for every other verdict.
double RewardForEvaluation(const v1::EvaluationResult& evaluation, double reference_speedup);

}  // namespace kforge
