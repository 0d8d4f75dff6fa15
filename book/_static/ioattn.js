/* Scripts of the book. Loaded by _config.yml (sphinx.config.html_js_files). */

/* The sidebar toggles that the page shows work at every width.

   The theme's page has two buttons of each kind (`.primary-toggle`: the table of contents,
   `.secondary-toggle`: this page's contents): one in the top navigation bar, which this book's
   layout never shows, and the one drawn in the article's header. The theme's scripts bind only
   the first of each kind (document.querySelector), the hidden one, so on phones and tablets the
   visible button did nothing and the table of contents could not be opened (pydata-sphinx-theme
   0.17, upstream issue #2451; later releases of the theme need Sphinx 8, jupyter-book 1 needs
   Sphinx 7, so no version pin helps). A click on any other toggle is handed to the bound one, which then
   does what the theme intends: below the theme's breakpoint it opens the sidebar as a modal
   dialog (closed by Escape, by a tap outside it, or by following a link), on wide screens it folds
   the sidebar away and back. Being a <button>, the visible toggle answers Enter and Space too.

   The click is caught on the way down (capture phase, on the document), so if a later version of
   the theme binds every toggle itself, the click still reaches exactly one handler. */
document.addEventListener(
  "click",
  (event) => {
    for (const kind of ["primary-toggle", "secondary-toggle"]) {
      const button = event.target.closest && event.target.closest(`.${kind}`);
      if (!button) continue;
      const bound = document.querySelector(`.${kind}`);
      if (bound && bound !== button) {
        event.preventDefault();
        event.stopPropagation();
        bound.click();
      }
      return;
    }
  },
  true,
);

/* Formulas wider than their box scroll sideways (ioattn.css); phones draw no scrollbar until one
   scrolls, so each scroll box with part of its formula out of view gets the class
   `ioattn-more-right` (or `ioattn-more-left`), which draws a shadow on that side. Updated when a
   formula is scrolled and when the column changes width. */
(() => {
  const SLACK = 1; // px: a box overflowing by less is not marked
  const SCROLLERS = "span.math, div.math mjx-container";
  const mark = (box) => {
    const hidden = box.scrollWidth - box.clientWidth;
    box.classList.toggle("ioattn-more-left", hidden > SLACK && box.scrollLeft > SLACK);
    box.classList.toggle(
      "ioattn-more-right",
      hidden > SLACK && box.scrollLeft < hidden - SLACK,
    );
  };
  const start = () => {
    const markAll = () => document.querySelectorAll(SCROLLERS).forEach(mark);
    document.addEventListener(
      "scroll",
      (event) => {
        if (event.target instanceof Element && event.target.matches(SCROLLERS)) {
          mark(event.target);
        }
      },
      { capture: true, passive: true },
    );
    new ResizeObserver(markAll).observe(document.querySelector("article") || document.body);
    markAll();
  };
  // MathJax (loaded asynchronously, before the load event) typesets the page after it loads.
  window.addEventListener("load", () => {
    const startup = window.MathJax && window.MathJax.startup;
    if (startup && startup.promise) startup.promise.then(start);
    else start();
  });
})();

/* The title of a folded solution, "Solution to Exercise 1.1", links to its exercise; a tap on
   the title should unfold the solution, but a tap on the link part of it jumped back to the
   exercise instead (and sphinx-togglebutton, which listens on the title, failed on the link).
   A click on a link inside the title of any folded box now unfolds or folds that box, as a
   click elsewhere on the title does, and the page stays where it is. */
document.addEventListener(
  "click",
  (event) => {
    const link = event.target.closest && event.target.closest("a");
    const title = link && link.closest(".admonition.toggle > .admonition-title");
    if (!title) return;
    event.preventDefault();
    event.stopPropagation();
    const button = title.querySelector("button.toggle-button");
    if (button) button.click();
  },
  true,
);
