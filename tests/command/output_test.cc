#include "ladder/command/output.h"

#include <gtest/gtest.h>
