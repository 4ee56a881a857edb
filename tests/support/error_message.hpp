// The message of the exception a call throws, for tests that check what an error says.
#pragma once

#include <boost/test/unit_test.hpp>
#include <exception>
#include <string>

namespace nlb::test {

/// Calls fn() and returns the message of the `E` it throws. Fails the current test (and
/// returns "") if it throws nothing or an exception of another type.
template <class E, class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    BOOST_ERROR("expected another exception type, got: " << e.what());
    return {};
  }
  BOOST_ERROR("expected an exception, nothing was thrown");
  return {};
}

}  // namespace nlb::test
