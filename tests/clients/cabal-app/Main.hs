module Main (main) where

import Foreign.C.String (CString, peekCString)

foreign import ccall unsafe "c10_device_name" c10DeviceName :: IO CString

main :: IO ()
main = c10DeviceName >>= peekCString >>= putStrLn . ("c10 device: " ++)
