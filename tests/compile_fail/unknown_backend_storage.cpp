// A backend the library does not know has no storage types: the primary template refuses it.
// expect: nlb::storage_traits<Backend, T>: no storage for this backend
#include <nlb/core/storage.hpp>

struct my_backend {};

#ifdef NLB_SHOULD_FAIL
using MatrixT = nlb::backend_matrix<my_backend, float>;
#else
using MatrixT = nlb::backend_matrix<nlb::backend::scalar, float>;
#endif

int main() {
  MatrixT m(2, 3);
  return m.size() == 6 ? 0 : 1;
}
