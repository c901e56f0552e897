#include "ladder/command/output.h"
