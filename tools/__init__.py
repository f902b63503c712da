"""Developer tools kept out of the installed package: the ptxas audit, the GPU probes, the PTX corpus."""
