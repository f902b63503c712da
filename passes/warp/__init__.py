"""Passes on warp IR (warp IR in, warp IR out): staging, pipelining, fragment reads, swizzles, 3xTF32."""
