builtin.module {
  ptx.module attributes {version = "8.0", target = "sm_90", address_size = "64"} {
    ptx.entry "k" [".u64 a"] {
      ptx.shared "buf" "24" {size = "1024"}
    }
  }
}
