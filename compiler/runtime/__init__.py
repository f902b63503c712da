"""Running PTX: ptxas, the CUDA driver, the kernel ABI read from the IR."""
