# Turns a text file into a C++ source defining `const std::string& <NAME>()`.
file(READ ${INPUT} content)
set(delim "ladder_embed")
file(WRITE ${OUTPUT}
  "#include <string>\nnamespace ladder::cli {\nconst std::string& ${NAME}() {\n"
  "  static const std::string text = R\"${delim}(${content})${delim}\";\n  return text;\n}\n}\n")
