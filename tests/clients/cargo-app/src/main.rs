use std::ffi::CStr;
use std::os::raw::c_char;

extern "C" {
    fn c10_device_name() -> *const c_char;
}

fn main() {
    let name = unsafe { CStr::from_ptr(c10_device_name()) };
    println!("c10 device: {}", name.to_str().unwrap());
}
