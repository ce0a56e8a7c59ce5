// Is libtorch_cuda linked in? Nothing here references a torch_cuda symbol, so with the linker's
// --as-needed it is dropped unless the link says --no-as-needed -ltorch_cuda.
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <iostream>

int main() {
  std::cout << "hasCUDA " << at::globalContext().hasCUDA() << std::endl;
  try {
    at::detail::getCUDAHooks().init();
    std::cout << "cuda devices " << int(at::detail::getCUDAHooks().deviceCount()) << std::endl;
    std::cout << "c10 device: " << c10::Device(c10::kCUDA, 0).str() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << e.what() << std::endl;
    return 1;
  }
}
