func.func @f() {
  %x = tile.matmul (
}
