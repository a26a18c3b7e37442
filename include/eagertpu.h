/* EagerTPU C ABI. Hand-written; ffi/src/lib.rs is the implementation.
 * The PyTorch PrivateUse1 backend (python/) loads libeagertpu_ffi through it. */
#ifndef EAGERTPU_H_
#define EAGERTPU_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EAGERTPU_ABI_VERSION 1

/* The library version, a static NUL-terminated string. */
const char* eagertpu_version(void);

/* The C ABI version this library implements (EAGERTPU_ABI_VERSION). */
uint32_t eagertpu_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* EAGERTPU_H_ */
