// Package caps turns permission failures from the kernel into errors that
// name the capability that is missing.
package caps
