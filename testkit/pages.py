"""A synthetic site of real-looking pages, deterministic for a seed: a shared
news-site template (~1 KB) around each page's own title, date and body, with
topic words drawn Zipf-weighted. The corpus of tests/test_fingerprint.py (its
near-duplicate quality checks) and bench/simhash_rate.py (SimHash speed)."""

from __future__ import annotations

import random
from dataclasses import dataclass


def _words(text: str) -> list[str]:
    return text.split()


FUNCTION_WORDS = _words(
    """
the of and to a in is that for it as was with be by on not he this are or his from at
which but have an they you were her she there been one all we their has would when who
will more if no out so said what up its about into than them can only other new some
could time these two may then do first any my now such like our over man me even most
made after also did many before must through back years where much your way well down
should because each just those people how too little state good very make world still own
see men work long get here between both life being under never day same another know
while last might us great old year off come since against go came right used take three
"""
)

CONTENT_WORDS = _words(
    """
account action activity address advice agency agreement aircraft airport album analysis
animal answer apartment application approach area argument army article artist assembly
attention audience author authority average balance band bank base basis battle beach
bedroom behaviour benefit bicycle bill biology bird birth board boat body bond book border
bottle boundary branch bread bridge budget building business cabinet camera campaign
canal capital captain carbon career carriage castle cathedral cattle ceiling cell century
ceremony chain chairman champion channel chapter character charity chemistry child choice
church cinema circle citizen city claim class climate clinic club coast coffee collection
college colony column comedy command comment commission committee community company
competition complex computer concert condition conference congress connection constitution
contract control corner cottage council country county course court crew crime crisis crop
culture currency customer cycle damage dance database daughter debate decade decision
defence degree delivery democracy department design detail development device diet
director disease district doctor document domain drama dream driver drug economy edition
editor education effect election electricity element emergency emperor empire employee
energy engine engineer entrance environment episode equipment estate evening event
evidence examination exchange exhibition experience experiment expert factory family
farmer fashion feature festival fiction field figure film finance fishing flight flood
floor flower football forest fortune foundation frame freedom frequency fruit fuel
function funding furniture galaxy gallery garden gate generation genre geography glass
government governor grain graph gravity guitar habitat harbour harvest health heart
heritage highway history holiday hospital hotel household housing hunter hydrogen identity
image income index industry infection inflation information injury insect institute
instrument insurance interest interview invasion investment island journal journey judge
jury kingdom kitchen knowledge laboratory lake landscape language laser lawyer layer leader
league lecture legend library licence lighthouse literature loan locomotive machine
magazine magnet majority manager manuscript map market marriage material matrix meadow
measure medicine member memory merchant message metal method migration military mineral
minister mission model molecule monastery monument mountain museum music mystery nation
navy network newspaper novel nucleus number nurse ocean office official opera operation
opinion orbit orchestra organ organisation oxygen painting palace parliament particle
partner passenger patient pattern payment peninsula pension performance period permit
philosophy photograph physics pilot planet plant plastic platform poetry police policy
pollution population port portrait poverty power prayer president pressure price priest
prince prison producer product profession professor programme project property protein
province publication publisher quality quarter queen question radiation radio railway
rainfall reaction reader recipe record reform region regiment relation religion report
republic research reserve resident resource restaurant revenue revolution rhythm river
road rocket route rural sailor salary satellite scale scholar school science score
sculpture season secretary sector senate sequence service settlement shelter ship shore
signal silver singer sister skill society software soil soldier solution song species
speech sport stadium station statue steam steel storm strategy stream street structure
student studio subject suburb summit surface survey symbol symphony system tax teacher
team technology telescope television temperature temple tenant territory textile theatre
theory ticket timber tissue title tobacco tourism tower trade tradition traffic tragedy
train transport treasure treaty trial tribe tunnel university valley vehicle venue vessel
village violin visitor voice volcano volume voyage wage warehouse water wealth weapon
weather website wheat wildlife window wine winter witness woman worker workshop writer yard
ancient annual central civil coastal colonial commercial common complete cultural digital
domestic early eastern economic electric environmental federal final financial foreign
formal general global historic industrial international legal local major medical modern
musical national natural northern novel official original political popular private
public regional royal rural scientific southern special strong traditional urban western
"""
)

MONTHS = "January February March April May June July August September October November December"
MONTH_NAMES = MONTHS.split()
BANNER = (
    "Our offices will be closed for the holiday weekend and orders placed now will ship on Tuesday."
)

HEADER = (
    "Northwind Gazette: news, analysis and opinion since 1898. "
    "Home World Business Technology Science Health Sport Culture Travel Opinion Podcasts "
    "Newsletters Subscribe Sign in Search the archive."
)
FOOTER = (
    "About us. Contact the newsroom. Advertise with us. Careers at Northwind Media. "
    "Terms of use. Privacy policy. Cookie settings. Accessibility statement. "
    "Corrections and clarifications. Complaints and editorial standards. "
    "Northwind Media Limited is registered in England and Wales, company number 0412 7781, "
    "registered office 14 Harbour Street, Bristol. All rights reserved. "
    "Follow us on social media for the latest headlines and weekend long reads. "
    "Sign up to our morning briefing, delivered to your inbox at seven every weekday. "
    "Reader support keeps our journalism open and independent for everyone, everywhere."
)


def _zipf_weights(n: int) -> list[float]:
    return [1.0 / (rank + 1) for rank in range(n)]


@dataclass(frozen=True)
class Page:
    """A page of the site: shared template (~1 KB) around its own title, date and body."""

    title: str
    date: str
    paragraphs: tuple[str, ...]

    def text(self) -> str:
        body = "\n\n".join(self.paragraphs)
        return f"{HEADER}\n{self.title}\nPublished {self.date}\n\n{body}\n\n{FOOTER}\n"

    def main_text(self) -> str:
        """The visible text of ``html()`` without its boilerplate: the <title>
        (the site's name) and the article, not the nav bar nor the footer."""
        body = "\n\n".join(self.paragraphs)
        return f"{HEADER.split(':')[0]}\n{self.title}\nPublished {self.date}\n\n{body}\n"

    def html(self) -> str:
        """The same page as HTML: markup, head, scripts, styles, comments, an svg
        logo, none of which is visible text. Its visible text normalises to
        ``normalise(self.text())`` with its boilerplate (the nav bar in a
        <header>, a <footer>), to ``normalise(self.main_text())`` without."""
        body = "\n".join(f"<p>{p}</p>" for p in self.paragraphs)
        return (
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{HEADER.split(':')[0]}</title>"
            "<style>body{font-family:serif}.nav a{margin:0 4px}</style>"
            "<script>window.dataLayer=[{'page':'article','ab':'variant-b'}];</script>"
            "</head>\n<body><header><svg viewBox='0 0 10 10'><title>logo</title>"
            "<text>NG</text></svg>"
            f"<nav class='nav'><a href='/'>{HEADER.split(':', 1)[1]}</a></nav></header>"
            f"<!-- article {self.title!r} -->\n<main><h1>{self.title}</h1>"
            f"<p class='byline'>Published <time>{self.date}</time></p>\n{body}</main>"
            "<noscript>Please enable JavaScript</noscript>"
            "<script>(function(){var s=document.createElement('script');})();</script>"
            f"<footer>{FOOTER}</footer></body></html>\n"
        )


def make_pages(
    count: int, seed: int = 20261122, min_chars: int = 2000, max_chars: int = 10000
) -> list[Page]:
    """``count`` distinct pages, deterministic for a seed: each has its own
    topic (a Zipf-weighted draw of ~40-120 content words), function words with
    a common Zipf distribution, numbers and years, and a body of min_chars to
    max_chars characters."""
    rng = random.Random(seed)
    function_weights = _zipf_weights(len(FUNCTION_WORDS))

    def word(topic: list[str], topic_weights: list[float]) -> str:
        r = rng.random()
        if r < 0.45:
            return rng.choices(FUNCTION_WORDS, function_weights)[0]
        if r < 0.93:
            return rng.choices(topic, topic_weights)[0]
        if r < 0.97:
            return rng.choice(CONTENT_WORDS)
        return str(rng.choice([rng.randint(2, 99), rng.randint(1700, 2025)]))

    pages = []
    for _ in range(count):
        topic = rng.sample(CONTENT_WORDS, rng.randint(40, 120))
        topic_weights = _zipf_weights(len(topic))
        target = rng.randint(min_chars, max_chars)
        paragraphs: list[str] = []
        size = 0
        while size < target:
            sentences = []
            for _ in range(rng.randint(2, 6)):
                words = [word(topic, topic_weights) for _ in range(rng.randint(8, 24))]
                if rng.random() < 0.4:
                    words[rng.randrange(2, len(words) - 1)] += ","
                sentences.append(" ".join(words).capitalize() + ".")
            paragraphs.append(" ".join(sentences))
            size += len(paragraphs[-1]) + 2
        title = " ".join(rng.choices(topic, topic_weights, k=rng.randint(4, 9))).capitalize()
        date = f"{rng.randint(1, 28)} {rng.choice(MONTH_NAMES)} {rng.randint(2015, 2025)}"
        pages.append(Page(title, date, tuple(paragraphs)))
    return pages
