// Argument checks shared by the row kernels. Internal to nlb/kernels.
#pragma once

#include <string>

#include "nlb/core/errors.hpp"
#include "nlb/core/math_policy.hpp"
#include "nlb/core/matrix.hpp"

namespace nlb::kernels::detail {

/// Throws ArgumentError unless n >= min_length; `what` names the kernel and argument.
inline void check_row_length(const char* what, Index n, Index min_length) {
  if (n < min_length) {
    throw ArgumentError(nlb::detail::expected_found(
        std::string(what), "a length >= " + std::to_string(min_length), n));
  }
}

/// The checks of a vector-matrix product's sizes: k and n >= 0, the row stride ldw >= min_ldw.
inline void check_product(const char* what, Index k, Index n, Index ldw, Index min_ldw) {
  check_row_length(what, k, 0);
  check_row_length(what, n, 0);
  check_row_length(what, ldw, min_ldw);
}

/// True for the math policies the kernels know (nlb/core/math_policy.hpp).
template <class Math>
inline constexpr bool is_math_policy = math::is_policy<Math>;

}  // namespace nlb::kernels::detail
