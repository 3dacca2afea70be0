fn main() {
    b12x_build::build_kernels();
}
