// A backend the library does not know has no Context: the primary template refuses it by name.
// expect: nlb::Context<Backend>: no context for this backend
#include <nlb/core/context.hpp>

struct my_backend {};

#ifdef NLB_SHOULD_FAIL
using ContextT = nlb::Context<my_backend>;
#else
using ContextT = nlb::Context<nlb::backend::scalar>;
#endif

int main() {
  ContextT context;
  return sizeof(context) > 0 ? 0 : 1;
}
