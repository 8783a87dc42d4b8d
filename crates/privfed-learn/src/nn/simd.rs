//! Kernels compiled for the CPU's widest vector instructions.
//!
//! `pulp` compiles a body inside a function carrying the CPU's target features (AVX2 and FMA on
//! x86-64 CPUs that have them, NEON on aarch64) and picks that function at run time. Only code
//! inlined into it gets the wider vectors, and LLVM inlines neither a large closure nor a
//! function item called through `FnOnce` there (measured: the max pool's backward pass stayed on
//! SSE at 8% of a LeNet-5 step both ways, and took 3% as a `WithSimd` method). So
//! [`simd_kernel!`] writes each kernel as a struct of its arguments whose `WithSimd` method, the
//! kernel's body, is `#[inline(always)]`. Rust never contracts `a·b + c` into an FMA, so a
//! kernel gives the same bits on every CPU.

/// `simd_kernel!(Name<'a> => kernel(arg: Type, …));` defines `Name` holding the arguments of
/// the `#[inline(always)]` function `kernel`; [`run`]`(Name { arg, … })` calls `kernel` compiled
/// for the CPU's widest vectors.
macro_rules! simd_kernel {
    ($(#[$meta:meta])* $name:ident<$lt:lifetime> => $kernel:ident($($arg:ident: $ty:ty),* $(,)?)) => {
        $(#[$meta])*
        struct $name<$lt> {
            $($arg: $ty),*
        }

        impl pulp::WithSimd for $name<'_> {
            type Output = ();

            #[inline(always)]
            fn with_simd<S: pulp::Simd>(self, _: S) {
                let $name { $($arg),* } = self;
                $kernel($($arg),*)
            }
        }
    };
}
pub(crate) use simd_kernel;

/// Runs a kernel defined by [`simd_kernel!`] compiled for the widest vectors this CPU has.
#[inline(always)]
pub(crate) fn run(kernel: impl pulp::WithSimd<Output = ()>) {
    pulp::Arch::new().dispatch(kernel)
}
