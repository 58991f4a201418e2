// MathJax 3 configuration for pymdownx.arithmatex (generic mode): typeset only
// the elements with class "arithmatex", written as \( \) and \[ \].
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]],
         processEscapes: true, processEnvironments: true },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" }
};
