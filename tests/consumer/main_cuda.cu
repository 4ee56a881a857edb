// The CUDA backend from the installed package (find_package(nlbudget COMPONENTS cuda)): a device
// MLP against the host one when a GPU is usable; otherwise it says why and exits 0 (building it is
// the check on a machine without a GPU).
#include <nlb/cuda.cuh>
#include <nlb/mlp.hpp>

#include <cstdio>

int main() {
  const nlb::cuda::DeviceStatus status = nlb::cuda::device_status();
  if (!status.usable) {
    std::printf("consumer_cuda: no usable GPU (%s); built only\n", status.description.c_str());
    return 0;
  }
  using HostMlp = nlb::Mlp<float, nlb::Dynamic, nlb::Dynamic, nlb::GeluTanh, nlb::backend::scalar>;
  const HostMlp host(nlb::RowMatrix<float>::Constant(8, 32, 0.05f), nlb::RowVector<float>::Zero(32),
                     nlb::RowMatrix<float>::Constant(32, 8, -0.02f),
                     nlb::RowVector<float>::Zero(8));
  nlb::Context<nlb::backend::cuda> ctx;
  const auto device = nlb::to_backend(nlb::backend::cuda{}, host);
  const nlb::RowMatrix<float> X = nlb::RowMatrix<float>::Ones(3, 8);
  const auto dX = nlb::cuda::upload(ctx, X);
  nlb::cuda::DeviceMatrix<float> dY(3, 8);
  decltype(device)::Workspace ws;
  device.forward(ctx, dX.view(), dY.view(), ws);
  // The same call on the host: the host MLP on the same input.
  nlb::Context<nlb::backend::scalar> host_ctx;
  HostMlp::Workspace host_ws;
  nlb::RowMatrix<float> Y(3, 8);
  host.forward(host_ctx, X, Y, host_ws);
  const float error = (nlb::cuda::download(ctx, dY.view()) - Y).cwiseAbs().maxCoeff();
  std::printf("consumer_cuda: %s, max |device - host| = %g\n", status.description.c_str(), error);
  return error < 1e-5f ? 0 : 1;
}
