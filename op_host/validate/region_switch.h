// HPMOE_FUZZ_NO_REGION_CHECK turns the slot and region checks of the load-time validator off. Only the
// libFuzzer build may set it (fuzz/CMakeLists.txt, option HPMOE_FUZZ_NO_REGION_CHECK), to show that the
// executing fuzzer finds what those checks prevent (docs/reliability.md); every other build refuses it.
#pragma once

#if defined(HPMOE_FUZZ_NO_REGION_CHECK) && !defined(HPMOE_FUZZ_BUILD)
#error "HPMOE_FUZZ_NO_REGION_CHECK is only for the libFuzzer build (-DHPMOE_FUZZ=ON)"
#endif

#ifdef HPMOE_FUZZ_NO_REGION_CHECK
#define HPMOE_REGION_CHECK 0
#else
#define HPMOE_REGION_CHECK 1
#endif
