// Project-written stand-in for CANN's kernel_operator.h: only the AscendC surface the hpmoe kernel uses,
// with the documented signatures, executing on host threads (the hicann/catlass tests/unittest/stub/
// approach). Used only when CANN is absent; a CANN build puts the real headers first on the include path.
#pragma once

#include "stub_copy.h"
#include "stub_core.h"
#include "stub_tensor.h"
#include "stub_vector.h"
