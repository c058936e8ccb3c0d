// Package kfeature names the optional kernel features that xdpkit's tests
// may find missing on an older kernel, with the Linux version that brought
// each, and ends a test as not applicable where the library's own probe
// found one missing ([NotApplicable]). The names are those of README's
// kernel table; a test checks that they are there.
//
// A test that needs a feature asks the library (an ErrNotSupported, a
// fallback it reports), never the kernel version. Where the kernel's BTF
// has a name that came with the feature (Feature.Witness), NotApplicable
// fails the test instead when that name is present: a broken probe cannot
// pass for a missing feature.
package kfeature
