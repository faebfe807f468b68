# cmake -DNOTEBOOKS_DIR=<notebooks/> -DOUTPUT_DIR=<html/notebooks> -P docs/notebook_pages.cmake
#
# The docs' pictures are the notebooks, executed: scripts/test runs each notebooks/NAME.ipynb on
# its build and writes html/notebooks/NAME.html (nbconvert). Doxygen's run starts the html folder
# afresh, so this writes a stand-in page for each notebook first: the main page's links then
# land on a page that says how to get the pictures, never on nothing.
file(GLOB notebooks "${NOTEBOOKS_DIR}/*.ipynb")
file(MAKE_DIRECTORY "${OUTPUT_DIR}")
foreach(notebook IN LISTS notebooks)
  get_filename_component(name "${notebook}" NAME_WE)
  file(WRITE "${OUTPUT_DIR}/${name}.html" "<!DOCTYPE html>
<html><head><meta charset=\"utf-8\"><title>${name}.ipynb: not executed yet</title></head>
<body>
<h1>${name}.ipynb</h1>
<p>This notebook has not been executed in this build. <code>scripts/test</code> executes every
notebook in <code>notebooks/</code> on the programs it built and writes the result here, plots and
all; or open <code>notebooks/${name}.ipynb</code> in Jupyter after <code>scripts/tour</code>.</p>
<p><a href=\"../index.html\">Back to the main page</a></p>
</body></html>
")
endforeach()
