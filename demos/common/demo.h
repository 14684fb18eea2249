#pragma once
// What the chapter demos share, one job per file: the toy data and stack (toy_data.h), the pictures
// (pictures.h), the printed text and progress line (terminal_text.h), the options and output files (options.h).
// Demos are programs: they print; the libraries they call return values.
#include "options.h"
#include "pictures.h"
#include "terminal_text.h"
#include "toy_data.h"
