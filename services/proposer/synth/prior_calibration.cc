// Ridge regression of log(measured / prior) on parameter=value indicators.
#include "services/proposer/synth/prior_calibration.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace kforge::synth {

std::vector<int> PriorCalibration::AddFeatures(const Config& config) {
  std::vector<int> out;
  for (const auto& [name, value] : config.values()) {
    const int next = static_cast<int>(feature_index_.size());
    out.push_back(feature_index_.emplace(absl::StrCat(name, "=", value), next).first->second);
  }
  return out;
}

std::vector<int> PriorCalibration::KnownFeatures(const Config& config) const {
  std::vector<int> out;
  for (const auto& [name, value] : config.values()) {
    auto it = feature_index_.find(absl::StrCat(name, "=", value));
    if (it != feature_index_.end()) out.push_back(it->second);
  }
  return out;
}

void PriorCalibration::Add(const Config& config, double prior_s, double measured_s) {
  if (!(prior_s > 0) || !(measured_s > 0) || !std::isfinite(prior_s) ||
      !std::isfinite(measured_s)) {
    return;
  }
  points_.emplace_back(AddFeatures(config), std::log(measured_s / prior_s));
}

void PriorCalibration::Fit(double ridge, int min_points) {
  const int n = static_cast<int>(feature_index_.size());
  weights_.assign(n, 0.0);
  if (points() < min_points || n == 0) return;
  // Centre the targets: the offset is common to every config and is not penalized.
  double mean = 0;
  for (const auto& [features, y] : points_) mean += y;
  mean /= points();
  // Normal equations (X'X + ridge I) w = X'(y - mean), solved by Gaussian elimination with
  // partial pivoting: a few dozen features at most.
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));
  for (int i = 0; i < n; ++i) a[i][i] = ridge;
  for (const auto& [features, y] : points_) {
    for (int f : features) {
      for (int g : features) a[f][g] += 1;
      a[f][n] += y - mean;
    }
  }
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    std::swap(a[col], a[pivot]);
    if (std::fabs(a[col][col]) < 1e-12) continue;  // cannot happen with ridge > 0
    for (int r = 0; r < n; ++r) {
      if (r == col) continue;
      const double factor = a[r][col] / a[col][col];
      if (factor == 0) continue;
      for (int c = col; c <= n; ++c) a[r][c] -= factor * a[col][c];
    }
  }
  for (int i = 0; i < n; ++i) weights_[i] = std::fabs(a[i][i]) < 1e-12 ? 0 : a[i][n] / a[i][i];
}

double PriorCalibration::Correction(const Config& config) const {
  if (weights_.empty()) return 0;
  double sum = 0;
  for (int f : KnownFeatures(config)) sum += weights_[f];
  return sum;
}

}  // namespace kforge::synth
