// The one header the wrong umbrella includes (the check reads the umbrella; nothing is compiled).
#pragma once
