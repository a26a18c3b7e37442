// grid_sampler_2d and grid_sampler_3d (F.grid_sample, spatial transformers,
// optical flow warps) as at:: compositions, registered at the autograd key:
// PyTorch differentiates the composition itself (gathers and arithmetic),
// so the gradients for the input and for the grid come with it and no
// backward kernel is needed.
//
// A grid point (x, y[, z]) in [-1, 1] is unnormalized to pixel coordinates
// (align_corners: -1 and 1 are the corner pixels' centres; else their outer
// edges), then padded: `border` clamps to the edge pixels, `reflection`
// reflects off the edges (the centres or the outer edges, as align_corners
// says) and clamps, `zeros` leaves it and samples outside read zero.
// Bilinear (trilinear) interpolation weighs the 2^n surrounding pixels,
// nearest picks the closest (ties to even), bicubic (2-d only) weighs 4 x 4
// pixels with the cubic convolution kernel (a = -0.75), padding applied to
// each tap.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <vector>

#include "backend.h"

namespace etpu {
namespace {

enum Interpolation : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

at::Tensor unnormalize(const at::Tensor& coordinate, int64_t size, bool align_corners) {
  return align_corners ? (coordinate + 1) / 2 * (size - 1) : ((coordinate + 1) * size - 1) / 2;
}

// `x` reflected into [low, high] (given doubled, so half-integers are exact).
at::Tensor reflect(const at::Tensor& x, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return at::zeros_like(x);
  double low = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  at::Tensor distance = (x - low).abs();
  at::Tensor extra = at::fmod(distance, span);
  at::Tensor flips = at::floor(distance / span);
  at::Tensor even = at::remainder(flips, 2) == 0;
  return at::where(even, extra + low, span - extra + low);
}

at::Tensor pad_coordinate(const at::Tensor& x, int64_t size, int64_t padding, bool align_corners) {
  if (padding == kBorder) return at::clamp(x, 0, size - 1);
  if (padding == kReflection) {
    at::Tensor r = align_corners ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
    return at::clamp(r, 0, size - 1);
  }
  return x;
}

// Samples of `flat` [N, C, prod(sizes)] at integer coordinates (one tensor per
// spatial dim, [N, points], in the input's dim order), zero outside.
at::Tensor gather_at(const at::Tensor& flat, const std::vector<at::Tensor>& at_coordinates,
                     const std::vector<int64_t>& sizes) {
  int64_t n = flat.size(0), c = flat.size(1);
  at::Tensor inside = at::ones_like(at_coordinates[0], at_coordinates[0].options().dtype(at::kBool));
  at::Tensor index = at::zeros_like(at_coordinates[0], at_coordinates[0].options().dtype(at::kLong));
  for (size_t d = 0; d < sizes.size(); ++d) {
    const at::Tensor& k = at_coordinates[d];
    inside = at::logical_and(inside, at::logical_and(k >= 0, k <= sizes[d] - 1));
    index = index * sizes[d] + at::clamp(k, 0, sizes[d] - 1).to(at::kLong);
  }
  int64_t points = index.size(1);
  at::Tensor values = at::gather(flat, 2, index.unsqueeze(1).expand({n, c, points}));
  return values * inside.unsqueeze(1).to(flat.scalar_type());
}

// The cubic convolution kernel's 4 weights for fractional offset t.
std::vector<at::Tensor> cubic_weights(const at::Tensor& t) {
  const double a = -0.75;
  auto near = [&](const at::Tensor& x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  auto far = [&](const at::Tensor& x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

at::Tensor grid_sample(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                       bool align_corners) {
  const int64_t nd = input.dim() - 2;
  const char* op = nd == 2 ? "grid_sampler_2d" : "grid_sampler_3d";
  TORCH_CHECK(input.dim() == grid.dim() && grid.size(-1) == nd && grid.size(0) == input.size(0), op,
              "(): expected input [N, C, spatial...] and grid [N, spatial..., ", nd, "] of the same batch, got ",
              input.sizes(), " and ", grid.sizes());
  TORCH_CHECK(interpolation >= 0 && interpolation <= 2 && padding >= 0 && padding <= 2, op,
              "(): unknown interpolation ", interpolation, " or padding ", padding);
  TORCH_CHECK(nd == 2 || interpolation != kBicubic, op, "(): bicubic interpolation only supports 4D input");
  int64_t n = input.size(0), c = input.size(1);
  std::vector<int64_t> sizes(input.sizes().begin() + 2, input.sizes().end());
  std::vector<int64_t> out_shape = {n, c};
  out_shape.insert(out_shape.end(), grid.sizes().begin() + 1, grid.sizes().end() - 1);
  at::Tensor flat = input.reshape({n, c, -1});
  at::Tensor points = grid.reshape({n, -1, nd}).to(input.scalar_type());
  // Coordinates in the input's dim order: the grid's last component is the
  // first spatial dim.
  std::vector<at::Tensor> coordinate;
  for (int64_t d = 0; d < nd; ++d) {
    at::Tensor x = unnormalize(points.select(2, nd - 1 - d), sizes[d], align_corners);
    if (interpolation != kBicubic) x = pad_coordinate(x, sizes[d], padding, align_corners);
    coordinate.push_back(x);
  }
  at::Tensor out;
  if (interpolation == kNearest) {
    std::vector<at::Tensor> k;
    for (const auto& x : coordinate) k.push_back(at::round(x));
    out = gather_at(flat, k, sizes);
  } else if (interpolation == kBilinear) {
    std::vector<at::Tensor> low, fraction;
    for (const auto& x : coordinate) {
      low.push_back(at::floor(x));
      fraction.push_back(x - low.back());
    }
    for (int64_t corner = 0; corner < (int64_t{1} << nd); ++corner) {
      std::vector<at::Tensor> k;
      at::Tensor weight = at::ones_like(fraction[0]);
      for (int64_t d = 0; d < nd; ++d) {
        bool up = (corner >> (nd - 1 - d)) & 1;
        k.push_back(up ? low[d] + 1 : low[d]);
        weight = weight * (up ? fraction[d] : 1 - fraction[d]);
      }
      at::Tensor term = gather_at(flat, k, sizes) * weight.unsqueeze(1);
      out = out.defined() ? out + term : term;
    }
  } else {
    // Bicubic: 4 x 4 taps around floor(x), each tap's coordinate padded.
    std::vector<at::Tensor> low, weights[2];
    for (int64_t d = 0; d < 2; ++d) {
      low.push_back(at::floor(coordinate[d]));
      weights[d] = cubic_weights(coordinate[d] - low[d]);
    }
    for (int64_t i = 0; i < 4; ++i) {
      for (int64_t j = 0; j < 4; ++j) {
        std::vector<at::Tensor> k = {pad_coordinate(low[0] + (i - 1), sizes[0], padding, align_corners),
                                     pad_coordinate(low[1] + (j - 1), sizes[1], padding, align_corners)};
        at::Tensor term = gather_at(flat, k, sizes) * (weights[0][i] * weights[1][j]).unsqueeze(1);
        out = out.defined() ? out + term : term;
      }
    }
  }
  return out.reshape(out_shape);
}

at::Tensor grid_sampler_2d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                           bool align_corners) {
  TORCH_CHECK(input.dim() == 4, "grid_sampler_2d(): expected 4D input, got ", input.sizes());
  return grid_sample(input, grid, interpolation, padding, align_corners);
}

at::Tensor grid_sampler_3d(const at::Tensor& input, const at::Tensor& grid, int64_t interpolation, int64_t padding,
                           bool align_corners) {
  TORCH_CHECK(input.dim() == 5, "grid_sampler_3d(): expected 5D input, got ", input.sizes());
  return grid_sample(input, grid, interpolation, padding, align_corners);
}

}  // namespace
}  // namespace etpu

// At the autograd key: PyTorch records the composition's own ops.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("grid_sampler_2d", etpu::grid_sampler_2d);
  m.impl("grid_sampler_3d", etpu::grid_sampler_3d);
}
