// A C entry point over c10: the device name, built by c10 itself (its std::string ABI matters).
#include <c10/core/Device.h>
#include <string>

extern "C" const char* c10_device_name() {
    static const std::string name = c10::Device(c10::DeviceType::CPU).str();
    return name.c_str();
}
