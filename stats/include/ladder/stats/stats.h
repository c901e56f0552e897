// ladder::stats — everything at once. Prefer including the specific header.
#pragma once

#include "ladder/stats/adaptive.h"
#include "ladder/stats/compare.h"
#include "ladder/stats/distributions.h"
#include "ladder/stats/interval.h"
#include "ladder/stats/power.h"
#include "ladder/stats/ratio.h"
#include "ladder/stats/reproducibility.h"
#include "ladder/stats/sample.h"
#include "ladder/stats/steady_state.h"
#include "ladder/stats/summary.h"
#include "ladder/stats/variance.h"
