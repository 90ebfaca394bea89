"""kernel_file.py, how Python reads the kernel file: its kernels (in code only, not comments),
the #defines the launchers share, each kernel's __launch_bounds__, and the register budgets its
opening comment states."""

from andrea_cli.kernel_file import integer_defines, kernel_parameters, launch_bounds, register_budgets


def test_register_budgets_are_read_per_entry():
    text = """// file
//   a_kernel1   does a
//                    grid (1); registers <= 40
//   b_kernel1, b_kernel2   two at once, T <= 9, held in registers
//                    more; registers <= 56, <= 80
//
// Backward:
//   c_kernel1        no budget written
int x;  // registers <= 3
"""
    assert register_budgets(text) == {"a_kernel1": 40, "b_kernel1": 56, "b_kernel2": 80}


def test_integer_defines_evaluate_names_and_skip_the_rest():
    text = ("#define A 4  // four\n#define B (16 * A)\n#define C __int_as_float(0x7f800000)\n"
            "#if X\n#define D 1\n#else\n#define D 0\n#endif\n#define E 1.5f\n")
    assert integer_defines(text) == {"A": 4, "B": 64, "D": 1}


def test_launch_bounds_are_read_before_or_after_void():
    text = ("#define W 4\nextern \"C\" __global__ void __launch_bounds__(256, 2) a(int n) {}\n"
            "extern \"C\" __global__ void __launch_bounds__(32 * W)\nb(int n) {}\n"
            "__global__ __launch_bounds__(64) void c(int n) {}\nextern \"C\" __global__ void d(int n) {}\n")
    assert launch_bounds(text) == {"a": 256, "b": 128, "c": 64}


def test_kernels_are_found_in_code_only():
    source = '''// scores_kernel9(const float* q) is only named in a comment
/* extern "C" __global__ void ghost(int n) {} */
extern "C" __global__ void __launch_bounds__(256) scaled(const float* in, float* out, long n, float s) {}
__global__ void mangled(void) {}
'''
    assert kernel_parameters(source) == {"scaled": ["const float* in", "float* out", "long n", "float s"], "mangled": []}
